"""HLO passes only the CPU backend runs."""
