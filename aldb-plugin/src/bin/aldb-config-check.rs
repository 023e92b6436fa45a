//! Checks an aldb-plugin config file offline, with the same parser and checks the plugin runs in
//! `on_load`, so a bad file is found before it stops a validator from starting.
//!
//! ```text
//! aldb-config-check aldb.json5
//! ```
//!
//! Prints the effective config (defaults filled in, relative paths resolved against the file's
//! directory) as JSON and exits 0, or prints the error and exits 2. Nothing is left behind:
//! nothing is bound or started, and `snapshot_dir` is not created; that it could be is checked
//! with a probe file in it or its nearest existing parent, removed at once.

use std::path::Path;
use std::process::ExitCode;

use aldb_plugin::Config;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path] = args.as_slice() else {
        eprintln!(
            "usage: aldb-config-check CONFIG_FILE\n\nValidates an aldb-plugin config file and prints the effective config."
        );
        return ExitCode::from(2);
    };
    if path == "-h" || path == "--help" {
        println!(
            "usage: aldb-config-check CONFIG_FILE\n\nValidates an aldb-plugin config file and prints the effective config."
        );
        return ExitCode::SUCCESS;
    }
    match Config::from_file(Path::new(path)) {
        Ok(config) => {
            if let Some(why) = config.records_disabled_reason() {
                eprintln!("warning: {why}");
            }
            println!("{}", config.to_json());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
