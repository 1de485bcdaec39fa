"""The auto-tuner's pure core: the search space derived from the plan table, a search that
respects measurement noise, file-system detection and tuning profiles (docs/TUNING.md)."""
