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
#[command(after_help = "Examples:
  nsys-lens man > ~/.local/share/man/man1/nsys-lens.1   the main page (then `man nsys-lens`)
  nsys-lens man --dir ~/.local/share/man/man1           every page: nsys-lens.1 and one per command")]
pub struct ManArgs {
    /// Write every page into DIR (nsys-lens.1 and the nsys-lens-COMMAND.1 pages it lists)
    /// instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
}

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

/// Prints the main man page (roff), or writes it and every command's page into `--dir`, all
/// of them or none.
pub fn man(args: ManArgs) -> anyhow::Result<Outcome> {
    let mut command = Cli::command();
    command.build();
    let Some(dir) = args.dir else {
        let mut stdout = std::io::stdout().lock();
        clap_mangen::Man::new(command).render(&mut stdout)?;
        stdout.flush()?;
        return Ok(Outcome::Done);
    };
    let pages = std::iter::once(command.clone()).chain(
        command
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .cloned(),
    );
    let staged = nsys_lens::output::Staged::default();
    for page in pages {
        let man = clap_mangen::Man::new(page);
        let mut output = nsys_lens::output::Output::create(&dir.join(man.get_filename()))?;
        man.render(&mut output)?;
        staged.add(output)?;
    }
    staged.commit()?;
    Ok(Outcome::Done)
}
