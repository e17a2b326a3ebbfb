# Written by `nsys-lens nsys-reports`: an `nsys stats` report that runs `nsys-lens {command}`
# on the SQLite export nsys hands it and returns its rows, so every nsys output format shows
# them. nsys runs it in its own Python (which has no pyarrow): it calls the nsys-lens binary
# that wrote it, or $NSYS_LENS.

import csv
import io
import os
import re
import subprocess

import nsysstats

NSYS_LENS = os.environ.get("NSYS_LENS", {binary!r})
COMMAND = {command!r}

# Report argument -> nsys-lens flag (arguments of nsys stats are separated by `:`, reports by
# `,`: give rank lists with `-` ranges, `ranks=0-3`).
FLAGS = {flags!r}


def lens_rows(dbfile, parsed):
    """(header, rows) of `nsys-lens COMMAND --format csv` on `dbfile`, cells as the CLI shows
    them; raises with its message."""
    argv = [NSYS_LENS, COMMAND, "--format", "csv", "-q"]
    for name, flag in FLAGS.items():
        value = getattr(parsed, name, None)
        if value is True:
            argv.append(flag)
        elif value not in (None, False):
            argv.extend([flag, str(value)])
    argv.append(dbfile)
    try:
        out = subprocess.run(argv, capture_output=True, text=True)
    except OSError as err:
        raise RuntimeError(f"cannot run nsys-lens ({{NSYS_LENS}}): {{err}}; set NSYS_LENS")
    # Exit 1 with a header: an empty table (nsys prints its columns and no row).
    if out.returncode not in (0, 1) or not out.stdout:
        raise RuntimeError(out.stderr.strip())
    rows = list(csv.reader(io.StringIO(out.stdout)))
    return rows[0], [[as_the_cli_shows(cell) for cell in row] for row in rows[1:]]


def as_the_cli_shows(cell):
    """A cell as the CLI's table shows it: a yes/no column `yes` or `no`, an empty cell `-`
    (numbers stay numbers, in ns, as nsys' own reports print them)."""
    return {{"true": "yes", "false": "no", "": "-"}}.get(cell, cell)


INTEGER = re.compile(r"^-?[0-9]+$")


def literal(cell):
    """A cell as SQL: an integer as itself, anything else as its text."""
    if INTEGER.match(cell):
        return cell
    return "'" + cell.replace("'", "''") + "'"


def values_query(header, rows):
    """The rows as one SELECT, named as nsys-lens names its columns."""
    names = ", ".join(
        f'column{{i + 1}} AS "{{name}}"' for i, name in enumerate(header)
    )
    if not rows:
        nulls = ", ".join(f'NULL AS "{{name}}"' for name in header)
        return f"SELECT {{nulls}} WHERE 0"
    values = ", ".join("(" + ", ".join(literal(c) for c in row) + ")" for row in rows)
    return f"SELECT {{names}} FROM (VALUES {{values}})"


class {class_name}(nsysstats.StatsReport):

    display_name = {display!r}
    usage = {usage!r}
    _arg_opts = {arg_opts}

    def setup(self):
        err = super().setup()
        if err is not None:
            return err
        try:
            header, rows = lens_rows(self.dbfile, self.parsed_args)
        except RuntimeError as failure:
            # nsys formats the message with its own fields: keep braces literal.
            return str(failure).replace("{{", "{{{{").replace("}}", "}}}}")
        self.query = values_query(header, rows)


if __name__ == "__main__":
    {class_name}.Main()
