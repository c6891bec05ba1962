"""Operations on compiled output: diff, publish."""
