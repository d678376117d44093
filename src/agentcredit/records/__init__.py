"""One schema per record kind a run writes, and the one way every reader reads them.

Every reader (compare, restore, fidelity, the credit viewer, success_by_hops, evaluate, bench) goes
through `read_json_record` / `read_jsonl_records` with a pydantic model from this package, so that a
damaged or hostile file is handled once, the same way everywhere:

- a record that fails its schema is left out with a one-line warning naming the file and line;
- numbers that cannot be meaningful are refused (`Infinity`, `NaN`, `1e400`, integers of thousands of
  digits), strings must be encodable (no lone surrogates), nesting is bounded;
- a cut-short last line of a JSON-lines file (a kill during its write) is left out, not fatal.

Names read from files become paths only through `safe_name`; output paths are checked by
`check_output_path` before any work starts. Files are replaced only through `atomic_write_text`.
"""

from agentcredit.records.files import (
    atomic_write_bytes,
    atomic_write_text,
    check_output_path,
    finite_or_none,
    json_line,
    new_dir_mode,
    publish_folder,
    replace_together,
    safe_name,
)
from agentcredit.records.reading import (
    RecordError,
    parse_json,
    read_json_record,
    read_jsonl_records,
    warn_left_out,
)

__all__ = [
    "RecordError",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_path",
    "finite_or_none",
    "json_line",
    "new_dir_mode",
    "publish_folder",
    "replace_together",
    "parse_json",
    "read_json_record",
    "read_jsonl_records",
    "safe_name",
    "warn_left_out",
]
