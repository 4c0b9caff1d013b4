"""The Docker-free local API: the real handlers behind HTTP, over the embedded backend (SQLite) or moto.

Importing this package puts the shared layer (layers/shared) on sys.path, as Lambda puts a layer on /opt/python.
"""

import sys
from pathlib import Path

_LAYER = str(Path(__file__).resolve().parent.parent / "layers" / "shared")
if _LAYER not in sys.path:
    sys.path.insert(0, _LAYER)
