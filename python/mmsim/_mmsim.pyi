"""The compiled engine (crates/mmsim-py): JSON in, JSON out."""

class MmsimError(ValueError):
    """A bad workload, knob, profile or file: the message is one line naming what is wrong."""

def run(workload_json: str, sets: list[tuple[str, str]] = ..., check: bool = ...) -> str:
    """Run a workload given as JSON text; returns the report as JSON text."""

def check_workload(workload_json: str) -> None:
    """Check a workload given as JSON text as ``run`` would, without running it."""

def knobs() -> str:
    """Every knob as a JSON list of ``{name, default, values, help}``."""

def schema() -> str:
    """The workload format's vocabularies as a JSON object: ``ops``, and ``advice``,
    ``map_flags``, ``pattern`` and ``prot`` as lists of ``{word, value, linux}`` (Linux's uapi
    value and name; -1 and "" for mmsim's own)."""

def version() -> str:
    """The engine's version."""

def profiles() -> str:
    """The built-in hardware profiles as a JSON list of ``{name, description}``."""

def profile_show(name: str) -> str:
    """One profile as a JSON list of ``[PATH, VALUE]`` pairs (PATH as ``--set hw.PATH=``)."""

def profile_text(name: str) -> str:
    """The TOML text of a built-in profile, comments included."""
