//! A profile's name as Pyroscope reads it, `app{key=value,...}`: a syntax with no escape, so
//! the application name and every label value hold only characters it takes as such, and
//! text from elsewhere (the target's command, the host's name) has the others written `_`.

/// The most characters of text from elsewhere (the target's command, the host's name) put
/// into a profile's name.
const MAX_TEXT: usize = 64;

/// A character Pyroscope takes in a label's key (`flameql.IsTagKeyRuneAllowed`).
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// A character Pyroscope takes in an application name (`flameql.IsAppNameRuneAllowed`).
fn app_char(c: char) -> bool {
    key_char(c) || c == '-' || c == '/'
}

/// A character pinprof puts in a label's value. Pyroscope's syntax has no escape: a value
/// ends at `,` or `}`, so those (and `=`, `{`, spaces, control characters) never go in.
fn value_char(c: char) -> bool {
    key_char(c) || c == '-'
}

/// `text` cut at [`MAX_TEXT`] characters, each one `keep` refuses written `_`: text from
/// elsewhere (the target's command, the host's name) can then neither end the name or a
/// value nor add a label, and carries no control character.
fn escape(text: &str, keep: fn(char) -> bool) -> String {
    text.chars()
        .take(MAX_TEXT)
        .map(|c| if keep(c) { c } else { '_' })
        .collect()
}

/// A profile's application name (`name`'s part before the labels): only characters
/// Pyroscope takes in one (letters, digits, `_ . - /`), so it cannot open the label set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppName(String);

impl AppName {
    /// `pinprof.COMMAND` of the target's command (its `comm`, which the target chooses),
    /// escaped.
    pub fn of_command(command: &str) -> Self {
        let command = escape(command, app_char);
        Self(format!(
            "pinprof.{}",
            if command.is_empty() { "_" } else { &command }
        ))
    }
}

impl std::str::FromStr for AppName {
    type Err = String;

    /// The user's name, as given or refused (nothing of it is changed behind their back).
    fn from_str(name: &str) -> Result<Self, String> {
        if name.is_empty() || name.len() > 256 || !name.chars().all(app_char) {
            return Err(format!(
                "{name:?}: an application name is 1 to 256 letters, digits, _ . - /"
            ));
        }
        Ok(Self(name.to_string()))
    }
}

/// One `key=value` of a profile's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    key: String,
    value: String,
}

impl Label {
    /// A label of pinprof's own: `key` is pinprof's, `value` may come from elsewhere (the
    /// host's name) and is escaped.
    pub(super) fn escaped(key: &'static str, value: &str) -> Self {
        debug_assert!(key.chars().all(key_char));
        let value = escape(value, value_char);
        Self {
            key: key.to_string(),
            value: if value.is_empty() { "_".into() } else { value },
        }
    }
}

impl std::str::FromStr for Label {
    type Err = String;

    /// The user's `KEY=VALUE`, as given or refused.
    fn from_str(text: &str) -> Result<Self, String> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))?;
        let ok = |s: &str, keep: fn(char) -> bool| {
            !s.is_empty() && s.len() <= 256 && s.chars().all(keep)
        };
        if !ok(key, key_char) || !ok(value, value_char) {
            return Err(format!(
                "{text:?}: a key is letters, digits, _ . and a value also -"
            ));
        }
        if ["pid", "host", "__name__"].contains(&key) {
            return Err(format!("{text:?}: {key} is pinprof's own label"));
        }
        Ok(Self {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// Pyroscope's `app{key=value,...}`.
pub(super) fn series_name(app: &AppName, labels: &[Label]) -> String {
    let labels: Vec<String> = labels
        .iter()
        .map(|l| format!("{}={}", l.key, l.value))
        .collect();
    format!("{}{{{}}}", app.0, labels.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pyroscope's own parser of `name` (`segment.ParseKey`): the name up to `{`, then keys
    /// up to `=` and values up to `,` or `}`, no escape; the labels by key.
    fn parse_series(name: &str) -> (String, std::collections::BTreeMap<String, String>) {
        let (app, rest) = name.split_once('{').unwrap();
        let mut labels = std::collections::BTreeMap::new();
        let (mut key, mut value, mut in_value) = (String::new(), String::new(), false);
        for c in rest.chars() {
            match (in_value, c) {
                (false, '}') => break,
                (false, '=') => in_value = true,
                (false, c) => key.push(c),
                (true, ',' | '}') => {
                    labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                    in_value = false;
                }
                (true, c) => value.push(c),
            }
        }
        (app.to_string(), labels)
    }

    #[test]
    fn the_targets_text_cannot_add_or_change_a_label() {
        let hostile = "j{pid=1,x=y}a,\u{1b}]52;c;\u{7}=\n";
        let app = AppName::of_command(hostile);
        assert_eq!(app.0, "pinprof.j_pid_1_x_y_a___52_c____");
        let labels = [
            Label::escaped("pid", "42"),
            Label::escaped("host", hostile),
            "env=prod".parse().unwrap(),
        ];
        let (name, parsed) = parse_series(&series_name(&app, &labels));
        assert_eq!(name, app.0);
        assert_eq!(
            parsed.into_iter().collect::<Vec<_>>(),
            [
                ("env".to_string(), "prod".to_string()),
                ("host".into(), "j_pid_1_x_y_a___52_c____".into()),
                ("pid".into(), "42".into()),
            ]
        );
        // Cut, and never empty.
        assert_eq!(AppName::of_command(&"a".repeat(1000)).0.len(), 8 + MAX_TEXT);
        assert_eq!(AppName::of_command("").0, "pinprof._");
        assert_eq!(Label::escaped("host", "").value, "_");
        // The user's text is taken as given or refused, never changed.
        for bad in ["a{b", "a b", "", "a,b"] {
            assert!(bad.parse::<AppName>().is_err(), "{bad}");
        }
        assert_eq!("shop/api-1".parse::<AppName>().unwrap().0, "shop/api-1");
        for bad in [
            "k=v,x=y", "k=v}", "my-key=v", "k=", "=v", "pid=1", "host=h", "k",
        ] {
            assert!(bad.parse::<Label>().is_err(), "{bad}");
        }
        assert_eq!(
            "k.1_a=v-1.b".parse::<Label>().unwrap(),
            Label {
                key: "k.1_a".into(),
                value: "v-1.b".into()
            }
        );
    }
}
