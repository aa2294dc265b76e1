"""The ASGI entry point of hypercorn workers: `gateway.serve.asgi:app`.

Loads the config file named by KBGATE_CONFIG (set by `kbgate serve`); when that file is
invalid right now, the config the master started with (gateway/serve/reload.py).
"""

from __future__ import annotations

import os

from gateway.core.logs import setup_logging
from gateway.serve.app import create_app
from gateway.serve.reload import load_worker_config
from gateway.serve.server import CONFIG_ENV

_config = load_worker_config(os.environ[CONFIG_ENV])
setup_logging(_config.log_level)
app = create_app(_config)
app.freeze_gc = True  # a worker: what start-up made lives as long as the process
