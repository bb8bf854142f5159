use anyhow::Result;
use clap::Parser;
use regex::Regex;
use serde::{Deserialize, Serialize};

/// Counts the words of a pattern in a JSON list of lines.
#[derive(Parser)]
struct Args {
    #[arg(long, default_value = r"\w+")]
    pattern: String,
}

#[derive(Serialize, Deserialize)]
struct Count {
    line: String,
    words: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let re = Regex::new(&args.pattern)?;
    let lines: Vec<String> = serde_json::from_str(r#"["a b c", "keyed entries"]"#)?;
    let counts: Vec<Count> = lines.into_iter().map(|l| Count { words: re.find_iter(&l).count(), line: l }).collect();
    println!("{}", serde_json::to_string(&counts)?);
    Ok(())
}
