//! The command-line tools' arguments: `--name value` (or `--name=value`) options, bare flags
//! and positional arguments, each option at most once; anything else is a usage error.

/// Parsed options, flags and positional arguments.
pub struct Args {
    values: Vec<(String, String)>,
    flags: Vec<String>,
    /// Arguments that are not options.
    pub positional: Vec<String>,
}

/// Parses `args` knowing which options take a value (`valued`) and which are flags.
pub fn parse(args: &[String], valued: &[&str], flags: &[&str]) -> Result<Args, String> {
    let mut out = Args { values: Vec::new(), flags: Vec::new(), positional: Vec::new() };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        if valued.contains(&name) {
            let v = match inline {
                Some(v) => v,
                None => it.next().cloned().ok_or_else(|| format!("{name} needs a value"))?,
            };
            if out.values.iter().any(|(n, _)| n == name) {
                return Err(format!("{name} is given twice"));
            }
            out.values.push((name.to_string(), v));
        } else if flags.contains(&name) && inline.is_none() {
            out.flags.push(name.to_string());
        } else if a.starts_with('-') {
            return Err(format!("unknown option {a} (see --help)"));
        } else {
            out.positional.push(a.clone());
        }
    }
    Ok(out)
}

impl Args {
    /// The value of an option, when given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
    /// The value of a required option.
    pub fn need(&self, name: &str) -> Result<&str, String> {
        self.get(name).ok_or_else(|| format!("{name} is required (see --help)"))
    }
    /// Whether a flag is given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }
    /// A whole number of seconds given as `name`, or `default`.
    pub fn seconds(&self, name: &str, default: u64) -> Result<std::time::Duration, String> {
        match self.get(name) {
            None => Ok(std::time::Duration::from_secs(default)),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|s| *s > 0)
                .map(std::time::Duration::from_secs)
                .ok_or_else(|| format!("{name} {v}: expected a whole number of seconds above 0")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_flags_and_positional_arguments() {
        let a = parse(
            &strings(&["--url=http://x", "--quiet", "go", "--user", "ops"]),
            &["--url", "--user"],
            &["--quiet"],
        )
        .unwrap();
        assert_eq!(a.get("--url"), Some("http://x"));
        assert_eq!(a.get("--user"), Some("ops"));
        assert!(a.flag("--quiet"));
        assert_eq!(a.positional, vec!["go".to_string()]);
        assert_eq!(parse(&strings(&["--user"]), &["--user"], &[]).err().unwrap(), "--user needs a value");
        assert_eq!(parse(&strings(&["--x"]), &[], &[]).err().unwrap(), "unknown option --x (see --help)");
        assert!(parse(&strings(&["--user", "a", "--user", "b"]), &["--user"], &[])
            .err()
            .unwrap()
            .contains("twice"));
        let t = parse(&strings(&["--timeout", "0"]), &["--timeout"], &[]).unwrap();
        assert!(t.seconds("--timeout", 5).is_err());
        assert_eq!(parse(&[], &[], &[]).unwrap().seconds("--timeout", 5).unwrap().as_secs(), 5);
    }
}
