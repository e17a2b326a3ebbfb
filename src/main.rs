//! The `nsys-lens` binary: parses arguments, runs one subcommand, and turns the outcome into the
//! exit code (0 success, 1 nothing found to report, 2 bad input or usage; 130 on Ctrl-C, after
//! removing partial outputs) in this one place.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse_from(cli::command_line());
    nsys_lens::output::remove_temporaries_on_interrupt();
    match cli::run(args) {
        Ok(cli::Outcome::Done) => ExitCode::SUCCESS,
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

/// A closed pipe (`nsys-lens info x | head`) is not an error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
