//! The `nsys-lens` binary: parses arguments, runs one subcommand, and turns the outcome into the
//! exit code (0 success, 1 nothing found to report (an empty table included) or a `compare --fail-if` check failed, 2 bad
//! input or usage; 128 + the signal's
//! number on SIGINT, SIGTERM, SIGHUP or SIGQUIT, after removing partial outputs) in this one
//! place.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match <cli::Cli as clap::Parser>::try_parse_from(cli::command_line()) {
        Ok(args) => args,
        Err(err) => return usage(&err),
    };
    nsys_lens::output::clean_up_on_signals();
    raise_open_file_limit();
    match cli::run(args) {
        Ok(cli::Outcome::Done) => ExitCode::SUCCESS,
        Ok(cli::Outcome::ChecksFailed) => ExitCode::from(1),
        Ok(cli::Outcome::Empty) => {
            eprintln!("nsys-lens: the table is empty: nothing to report (see its notes)");
            ExitCode::from(1)
        }
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) if err.downcast_ref::<cli::NothingFound>().is_some() => {
            eprintln!("nsys-lens: {err}");
            ExitCode::from(1)
        }
        Err(err) => {
            eprintln!("nsys-lens: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Raises the soft limit of open files to the hard one (as Go programs do at start): every
/// input holds a file open while it is read, and the usual soft limit of 1,024 would refuse a
/// capture of a thousand exports that the hard limit allows.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct passed, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Prints `--help`, `--version` or a usage error as clap would, but a failure to print (a full
/// disk) is an error line and exit 2, and a closed pipe a quiet exit, instead of being ignored.
fn usage(err: &clap::Error) -> ExitCode {
    use std::io::Write;
    if err.use_stderr() {
        let _ = err.print();
        return ExitCode::from(2);
    }
    let styled = err.render();
    let text = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsys-lens: error: cannot print: {e}");
            ExitCode::from(2)
        }
    }
}

/// A closed pipe (`nsys-lens info x | head`) is not an error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
