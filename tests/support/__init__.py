"""What the tests share: the real-server harness (also used by bench/), the config builder,
the test documents, signed Volcengine requests and the agent app fixtures."""
