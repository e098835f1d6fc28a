"""Every neighbour the desk calls: HTTP (deadline, size cap), commands, providers, metrics."""
