//! `pinprof check`: a gate for CI. A recording (made for the purpose, or given) is held
//! against limits: pinned carrier time, starvation, findings of given kinds. The verdict is
//! a short summary, an exit code (0 within limits, 1 a limit crossed, 2 could not measure)
//! and, for CI systems that read it, a JUnit XML report with one test case per limit.

use std::time::Duration;

use crate::analysis::{Analysis, findings::FindingKind};
use crate::units::secs;

/// The limits.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Carrier time pinned, in all, at most.
    pub max_pinned: Option<Duration>,
    /// Time every carrier was pinned or blocked at once, in all, at most.
    pub max_starvation: Option<Duration>,
    /// No finding of these kinds.
    pub fail_on: Vec<FindingKind>,
    /// Judge a damaged recording (see `Model::damage`) all the same.
    pub accept_damaged: bool,
}

/// One limit held against the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What was held, as a test case's name: "pinned carrier time at most 100ms".
    pub name: String,
    /// What was measured, in words.
    pub measured: String,
    pub passed: bool,
}

/// All the checks, and what was measured in.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub checks: Vec<Check>,
    /// The window, and the events lost in it (a check over lost events is said so).
    pub window_ns: u64,
    pub lost_events: u64,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The summary for people: a line per check, then the verdict.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let mark = if c.passed { "pass" } else { "FAIL" };
            out.push_str(&format!("  {mark}  {}: {}\n", c.name, c.measured));
        }
        let lost = if self.lost_events > 0 {
            format!(
                " ({} events lost: figures are at least these)",
                self.lost_events
            )
        } else {
            String::new()
        };
        let failed = self.checks.iter().filter(|c| !c.passed).count();
        out.push_str(&match failed {
            0 => format!(
                "pinprof check: within limits over {}{lost}\n",
                secs(self.window_ns)
            ),
            n => format!(
                "pinprof check: {n} of {} limits crossed over {}{lost}\n",
                self.checks.len(),
                secs(self.window_ns)
            ),
        });
        out
    }
}

/// Where a crossed pinning or starvation limit sends the reader: the site that pinned
/// longest, by its first application frame ("" when nothing pinned).
fn top_site(analysis: &Analysis) -> String {
    analysis
        .pinned_sites()
        .iter()
        .max_by_key(|s| s.total_ns)
        .map(|s| {
            let place = crate::analysis::findings::culprit(&s.stack)
                .or_else(|| s.stack.frames.first().cloned())
                .unwrap_or_else(|| "an unknown place".into());
            format!("; most pinned at `{place}` ({})", secs(s.total_ns))
        })
        .unwrap_or_default()
}

/// Holds the analysis against the limits.
pub fn evaluate(analysis: &Analysis, options: &Options) -> Verdict {
    let mut checks = Vec::new();
    if let Some(limit) = options.max_pinned {
        let pinned = crate::model::total(analysis.pinned_events().iter().map(|e| e.duration_ns()));
        let passed = u128::from(pinned) <= limit.as_nanos();
        let top = if passed {
            String::new()
        } else {
            top_site(analysis)
        };
        checks.push(Check {
            name: format!(
                "pinned carrier time at most {}",
                secs(limit.as_nanos() as u64)
            ),
            measured: format!(
                "{} pinned in {} events{top}",
                secs(pinned),
                analysis.pinned_events().len()
            ),
            passed,
        });
    }
    if let Some(limit) = options.max_starvation {
        let episodes = analysis.starvation();
        let starved =
            crate::model::total(episodes.iter().map(|e| e.end_ns.saturating_sub(e.start_ns)));
        let passed = u128::from(starved) <= limit.as_nanos();
        let top = if passed {
            String::new()
        } else {
            top_site(analysis)
        };
        checks.push(Check {
            name: format!(
                "carrier starvation at most {}",
                secs(limit.as_nanos() as u64)
            ),
            measured: format!("{} in {} episodes{top}", secs(starved), episodes.len()),
            passed,
        });
    }
    for &kind in &options.fail_on {
        let found: Vec<&str> = analysis
            .findings()
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.summary.as_str())
            .collect();
        let name = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        checks.push(Check {
            name: format!("no {name} finding"),
            measured: match found.first() {
                None => "none".into(),
                Some(first) => format!("{} found; first: {first}", found.len()),
            },
            passed: found.is_empty(),
        });
    }
    Verdict {
        checks,
        window_ns: analysis.duration_ns(),
        lost_events: analysis.model().counters.lost(),
    }
}

/// The verdict as JUnit XML: a test suite named `suite`, a test case per check.
pub fn junit(verdict: &Verdict, suite: &str) -> String {
    let failures = verdict.checks.iter().filter(|c| !c.passed).count();
    let time = verdict.window_ns as f64 / 1e9;
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pinprof check\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">\n",
        verdict.checks.len(),
        xml(suite),
        verdict.checks.len(),
    );
    for c in &verdict.checks {
        out.push_str(&format!(
            "    <testcase classname=\"pinprof.check\" name=\"{}\" time=\"{time:.3}\">\n",
            xml(&c.name)
        ));
        if c.passed {
            out.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                xml(&c.measured)
            ));
        } else {
            out.push_str(&format!(
                "      <failure message=\"{}\" type=\"limit\">{}</failure>\n",
                xml(&c.measured),
                xml(&c.measured)
            ));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// JUnit XML for a check that could not measure: one test case in error.
pub fn junit_error(suite: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pinprof check\" tests=\"1\" failures=\"0\" errors=\"1\">\n  <testsuite name=\"{}\" tests=\"1\" failures=\"0\" errors=\"1\">\n    <testcase classname=\"pinprof.check\" name=\"measure\">\n      <error message=\"{}\" type=\"measure\">{}</error>\n    </testcase>\n  </testsuite>\n</testsuites>\n",
        xml(suite),
        xml(message),
        xml(message)
    )
}

/// Text for XML attributes and elements; control characters (not allowed in XML 1.0) become
/// spaces.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_and_counts() {
        let verdict = Verdict {
            checks: vec![
                Check {
                    name: "pinned carrier time at most 100ms".into(),
                    measured: "1.50s pinned in <3> \"events\" & \u{1}".into(),
                    passed: false,
                },
                Check {
                    name: "no gridlock finding".into(),
                    measured: "none".into(),
                    passed: true,
                },
            ],
            window_ns: 2_000_000_000,
            lost_events: 0,
        };
        let xml = junit(&verdict, "pid 7");
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(
            xml.contains("&lt;3&gt; &quot;events&quot; &amp;  </failure>"),
            "{xml}"
        );
        assert!(!verdict.passed());
        assert!(verdict.summary().contains("1 of 2 limits crossed"));
    }
}
