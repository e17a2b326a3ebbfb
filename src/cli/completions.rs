//! `nsys-lens completions SHELL` and `nsys-lens man`: shell completions and a man page,
//! generated from the same clap definitions as `--help`.

use super::{Cli, Outcome};
use clap::CommandFactory;
use std::io::Write;

/// Options of `completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens completions bash > ~/.local/share/bash-completion/completions/nsys-lens
  nsys-lens completions zsh > ~/.zfunc/_nsys-lens
  nsys-lens completions fish > ~/.config/fish/completions/nsys-lens.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Options of `man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:
  nsys-lens man > ~/.local/share/man/man1/nsys-lens.1 && man nsys-lens")]
pub struct ManArgs {}

/// Prints the completion script for a shell. It is generated in memory first: the generator
/// panics on a write error, which a full disk or a closed pipe must not turn into a crash.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<Outcome> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "nsys-lens", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&script)?;
    stdout.flush()?;
    Ok(Outcome::Done)
}

/// Prints the man page (roff).
pub fn man(_: ManArgs) -> anyhow::Result<Outcome> {
    let mut stdout = std::io::stdout().lock();
    clap_mangen::Man::new(Cli::command()).render(&mut stdout)?;
    stdout.flush()?;
    Ok(Outcome::Done)
}
