# Written by `nsys-lens nsys-reports`: an `nsys analyze` rule that runs `nsys-lens {command}`
# on the SQLite export nsys hands it and flags the rows past a threshold. nsys runs it in its
# own Python: it calls the nsys-lens binary that wrote it, or $NSYS_LENS.

import csv
import io
import os
import subprocess

import nsysstats

NSYS_LENS = os.environ.get("NSYS_LENS", {binary!r})


def lens_rows(dbfile, argv):
    """The rows of `nsys-lens ... --format csv` on `dbfile`, as dicts; raises with its message."""
    try:
        out = subprocess.run([NSYS_LENS, *argv, "--format", "csv", "-q", dbfile],
                             capture_output=True, text=True)
    except OSError as err:
        raise RuntimeError(f"cannot run nsys-lens ({{NSYS_LENS}}): {{err}}; set NSYS_LENS")
    # Exit 1 with a header: an empty table, nothing to flag.
    if out.returncode not in (0, 1) or not out.stdout:
        raise RuntimeError(out.stderr.strip())
    return list(csv.DictReader(io.StringIO(out.stdout)))


def number(cell):
    return float(cell) if cell not in ("", None) else None


def literal(cell):
    """A CSV cell as SQL: an integer as itself, anything else (an empty cell too) as its text."""
    if cell.lstrip("-").isdigit():
        return cell
    return "'" + str(cell).replace("'", "''") + "'"


class {class_name}(nsysstats.ExpertSystemsReport):

    display_name = {display!r}
    usage = {usage!r}
    message_advice = {advice!r}
    message_noresult = {noresult!r}
    _arg_opts = [
        [['threshold'], {{'type': float, 'help': {threshold_help!r}, 'default': {threshold}}}],
    ]

    def MessageAdvice(self, extended=True):
        return self.message_advice.format(THRESHOLD=self.parsed_args.threshold)

    def MessageNoResult(self):
        return self.message_noresult.format(THRESHOLD=self.parsed_args.threshold)

    def setup(self):
        err = super().setup()
        if err is not None:
            return err
        try:
            rows = lens_rows(self.dbfile, {argv!r})
        except RuntimeError as failure:
            return str(failure).replace("{{", "{{{{").replace("}}", "}}}}")
        threshold = self.parsed_args.threshold
        flagged = [r for r in rows if self.flags(r, threshold)][: self._row_limit or None]
        columns = {columns!r}
        names = ", ".join(f'column{{i + 1}} AS "{{c}}"' for i, c in enumerate(columns))
        if not flagged:
            self.query = "SELECT " + ", ".join(f'NULL AS "{{c}}"' for c in columns) + " WHERE 0"
            return
        values = ", ".join("(" + ", ".join(literal(r[c]) for c in columns) + ")" for r in flagged)
        self.query = f"SELECT {{names}} FROM (VALUES {{values}})"

    @staticmethod
    def flags(row, threshold):
        return {condition}


if __name__ == "__main__":
    {class_name}.Main()
