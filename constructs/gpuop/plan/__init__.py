"""Stage 3, plan: a validated profile + the catalogs -> one frozen StackPlan per cluster."""
