"""Files in and out, strictly: atomic writes, pickle-free arrays and byte-reproducible
safetensors (`files`), YAML without duplicate keys or aliases (`yamlio`), one policy's weights
from a user file (`weights`), the output-path rules that refuse writing over an input
(`outputs`), the paper's published data behind a pinned sha256 (`paperdata`) and headless
matplotlib with atomic PNG writes (`plotting`).

Below every library package (pacbayes, es, worlds, run, report) and above only the basics
(errors, validation, choices): nothing here knows about configs, certificates or worlds.
"""
