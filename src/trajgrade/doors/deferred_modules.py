"""Modules whose code runs at the first use of one of their names, not when they are imported.

``genai_prices`` imports its price updater with its package, and the updater imports ``httpx2`` and ``asyncio``
(about 60 ms together) for the network fetch it makes once started. The command line never starts it: its
process (:func:`trajgrade.doors.cli.run`) makes those two modules deferred before anything imports them. An
``import httpx2`` then binds the module without running it; the first name looked up on it (``httpx2.get``,
``from httpx2 import Client``) or the first import of one of its submodules runs it, as a plain import would
have, and the module is an ordinary module from then on. Nothing else changes: the same module object is in
``sys.modules`` before and after, and a module imported already is left as it is.

A deferred package has no ``__path__`` until it runs, so that importing one of its submodules first runs the
package, in the order a plain import would. The command line's processes that defer modules grade in one thread;
a lock still keeps two threads from running a module twice.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any, cast

__all__ = ["DeferredModule", "defer"]

_LOCK = threading.RLock()
#: The deferred modules whose code is running, by name (a name looked up on one of them then is missing).
_RUNNING: set[str] = set()


class DeferredModule(ModuleType):
    """A module whose code has not run yet: a name it lacks runs it (Python looks here only for missing names)."""

    def __getattr__(self, name: str) -> Any:
        if not _run(self):  # its own code, running, looks up a name it has not set yet
            raise AttributeError(f"partially initialized module {self.__name__!r} has no attribute {name!r}")
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        _run(self)
        return list(self.__dict__)


def defer(name: str) -> bool:
    """Put module ``name``, not run, in ``sys.modules``; False (and nothing done) when it is imported already or
    cannot be found."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return False
    module = importlib.util.module_from_spec(spec)
    module.__dict__.pop("__path__", None)  # given back by _run: a submodule's import runs the package first
    module.__class__ = DeferredModule
    sys.modules[name] = module
    return True


def _run(module: ModuleType) -> bool:
    """Run a deferred module's code (once); False when it is running on this thread already."""
    with _LOCK:
        if not isinstance(module, DeferredModule):
            return True  # run meanwhile, on another thread
        spec = module.__spec__
        assert spec is not None and spec.loader is not None
        if spec.name in _RUNNING:
            return False
        _RUNNING.add(spec.name)
        try:
            if spec.submodule_search_locations is not None:
                module.__path__ = list(spec.submodule_search_locations)
            spec.loader.exec_module(module)
        except BaseException:
            if sys.modules.get(spec.name) is module:  # as a failed import: the next import tries again
                del sys.modules[spec.name]
            raise
        finally:
            _RUNNING.discard(spec.name)
        cast(Any, module).__class__ = ModuleType  # an ordinary module from now on
        return True
