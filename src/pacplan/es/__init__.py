"""Evolution Strategies for the prior: the pure algorithm (ask/tell) and its checkpoint files."""
