"""Debug tools: dumps, rendering, snapshots, and the bug-reproduction commands of ``xla-teach``."""
