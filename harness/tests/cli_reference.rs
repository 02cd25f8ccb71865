//! docs/cli.md's reference is what `harness … --help` prints, for every command and subcommand.
//!
//! The commands are found the way a reader finds them, from each help's `Commands:` section, so a
//! new command lands in the reference with no list to keep. `HARNESS_UPDATE_DOCS=1` rewrites the
//! reference instead of comparing.

use std::path::Path;
use std::process::Command;

const HEADING: &str = "## Reference\n";

#[test]
fn the_cli_reference_is_what_every_command_prints_for_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (head, written) = split_at_reference(&doc);
    let generated = reference(&[]);
    if std::env::var_os("HARNESS_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{head}{generated}")).unwrap();
        return;
    }
    if written != generated {
        let first = written.lines().zip(generated.lines()).position(|(a, b)| a != b);
        let line =
            head.lines().count() + first.unwrap_or_else(|| written.lines().count().min(generated.lines().count())) + 1;
        panic!(
            "docs/cli.md line {line} is not what `harness … --help` prints: run \
             `HARNESS_UPDATE_DOCS=1 cargo test -p harness --test cli_reference` and commit docs/cli.md"
        );
    }
}

#[test]
fn every_command_of_the_top_level_help_is_in_the_reference() {
    // A guard on the walk itself: were the `Commands:` sections misread, the reference would be
    // only `harness --help` and still match itself.
    let top = help(&[]);
    let commands = subcommands(&top);
    assert!(commands.len() >= 10 && commands.contains(&"run".to_owned()), "{commands:?}\n{top}");
    let generated = reference(&[]);
    for command in commands {
        assert!(generated.contains(&format!("### `harness {command}`\n")), "{command}");
    }
    assert!(generated.contains("### `harness cluster up`\n") && generated.contains("### `harness lkg show`\n"));
}

/// The part of docs/cli.md before the generated reference (its heading and comment kept), and
/// the part after.
fn split_at_reference(doc: &str) -> (&str, &str) {
    let start = doc.find(HEADING).expect("docs/cli.md has a `## Reference` heading");
    let after_comment = doc[start..]
        .find("-->\n")
        .map(|end| start + end + "-->\n".len())
        .expect("the reference starts with its comment");
    doc.split_at(after_comment)
}

/// `harness <path> --help` and every subcommand's below it, depth first, in the order the help
/// lists them.
fn reference(path: &[String]) -> String {
    let text = help(path);
    let name = std::iter::once("harness".to_owned()).chain(path.iter().cloned()).collect::<Vec<_>>().join(" ");
    let mut out = format!("\n### `{name}`\n\n```text\n{}\n```\n", text.trim_end());
    for command in subcommands(&text) {
        let mut below = path.to_vec();
        below.push(command);
        out.push_str(&reference(&below));
    }
    out
}

fn help(path: &[String]) -> String {
    // No environment but PATH: clap prints an `[env: NAME=value]` it finds set.
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(path)
        .arg("--help")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert!(output.status.success(), "harness {} --help: {}", path.join(" "), String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The names in a help's `Commands:` section, but `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}
