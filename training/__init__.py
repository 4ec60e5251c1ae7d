"""mars-train: self-play RL on the MARS games (the training loop is training/trainer.py)."""
