"""What the desk tells its operator: logs on stderr, metrics, slow calls and traces."""
