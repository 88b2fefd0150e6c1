//! `y3`: the Y3 command line.
//!
//! Each subcommand lives in its own module and exposes `XArgs` (clap) and
//! `run(&XArgs, &mut dyn Write)`; `main` only parses, dispatches and reports errors.
//!
//! Exit status ([`error::EXIT_HELP`]): 0 success, 1 runtime failure or not found (`get`),
//! 2 bad input or usage, 3 cannot connect, 4 refused by the router. Errors print one line
//! on stderr, `error: KIND: MESSAGE`, where KIND is the codec's stable error kind
//! (`negative_length`, `unexpected_end`, ...) or a CLI kind (`invalid_hex`, `invalid_json`,
//! `unreachable`, `wrong_pin`, `not_found`, `io`), and a `  try: ...` line when there is
//! something to try.

mod args;
mod demo;
mod encode;
mod error;
mod get;
mod input;
mod inspect;
mod logging;
mod memory;
mod notify;
mod observe;
mod reach;
mod send;
mod serve;
mod typed_json;

use std::io::{self, BufWriter};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "y3",
    // `0.1.0 (git 4a1e7d3c0f2b)`: the commit this binary is built from (build.rs).
    version = env!("Y3_VERSION"),
    about = "Encode, inspect and query Y3 packets (YoMo's tag-length-value wire format)",
    long_about = "Encode, inspect and query Y3 packets, YoMo's tag-length-value wire format.

Dialects (--dialect): golang (y3-codec-golang v1.7.3, the default), nvarint (yomorun/y3
v1.0.5) and draft02 (varint tags, no node flag on the wire).",
    arg_required_else_help = true,
    after_help = after_help()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `y3 --help`'s tail: exit statuses, the error line, examples.
fn after_help() -> String {
    format!(
        "{}
Errors print `error: KIND: MESSAGE` on stderr (KIND is a stable snake_case name), then
`  try: ...` when there is something to try.

Examples:
  echo '{{\"tag\":16,\"node\":[{{\"tag\":17,\"int32\":42}}]}}' | y3 encode
  y3 get --hex 9003110142 --path 0x10/0x11 --as int32
  y3 inspect --hex 9003110142",
        error::EXIT_HELP
    )
}

#[derive(Debug, Subcommand)]
enum Command {
    Encode(encode::EncodeArgs),
    Get(get::GetArgs),
    Inspect(inspect::InspectArgs),
    Serve(serve::ServeArgs),
    Demo(demo::DemoArgs),
    Send(send::SendArgs),
    Observe(observe::ObserveArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = match &cli.command {
        Command::Encode(args) => encode::run(args, &mut out),
        Command::Get(args) => get::run(args, &mut out),
        Command::Inspect(args) => inspect::run(args, &mut out),
        Command::Serve(args) => serve::run(args, &mut out),
        Command::Demo(args) => demo::run(args, &mut out),
        Command::Send(args) => send::run(args, &mut out),
        Command::Observe(args) => observe::run(args, &mut out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => error::report(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
