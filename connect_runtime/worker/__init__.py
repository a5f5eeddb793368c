"""The worker: herder (control plane), Spark runner and the exactly-once task loop."""
