"""`gpuop rehearse`: the compiled output on a real Kubernetes control plane with a simulated GPU fleet."""
