//! What waits on monitors were on: the classes of the monitors' objects, and the class
//! initializations waited for with the threads that ran them, in words for the views.

use crate::model::{ClassInitWait, Model};

/// A class initialization a site waited for, with its initializer's name, as views show it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InitWaitedFor {
    pub class: String,
    pub initializer: Option<InitializerThread>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InitializerThread {
    pub tid: u32,
    pub name: String,
    /// The virtual thread it ran, if one was mounted.
    pub vthread: Option<u64>,
}

impl std::fmt::Display for InitWaitedFor {
    /// `Shop$Fmt by worker-3 (virtual thread #25)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.class)?;
        if let Some(t) = &self.initializer {
            write!(f, " by {}", t.name)?;
            if let Some(v) = t.vthread {
                write!(f, " (virtual thread #{v})")?;
            }
        }
        Ok(())
    }
}

/// What waits on monitors were on, in words: `on a Shop$Till or class Shop$Registry`, or
/// `waiting for the initialization of Shop$Fmt by worker-3`; None when nothing is known.
pub fn monitors_said(
    classes: &std::collections::BTreeSet<String>,
    class_objects: &std::collections::BTreeSet<String>,
    inits: &std::collections::BTreeSet<InitWaitedFor>,
) -> Option<String> {
    const SHOWN: usize = 3;
    if !inits.is_empty() {
        let mut said: Vec<String> = inits.iter().take(SHOWN).map(|i| i.to_string()).collect();
        if inits.len() > SHOWN {
            said.push(format!("{} more", inits.len() - SHOWN));
        }
        return Some(format!(
            "waiting for the initialization of {}",
            said.join(", ")
        ));
    }
    // A `java.lang.Class` object is said by the class it stands for.
    let objects = classes
        .iter()
        .filter(|c| class_objects.is_empty() || c.as_str() != "java.lang.Class")
        .map(|c| format!("a {c}"));
    let said: Vec<String> = objects
        .chain(class_objects.iter().map(|c| format!("class {c}")))
        .collect();
    (!said.is_empty()).then(|| format!("on {}", said.join(" or ")))
}

/// A class initialization with its initializer named.
pub(crate) fn init_waited_for(model: &Model, wait: &ClassInitWait) -> InitWaitedFor {
    InitWaitedFor {
        class: wait.class.clone(),
        initializer: wait.initializer.map(|t| InitializerThread {
            tid: t.tid,
            name: model.thread_name(t.tid),
            vthread: t.vthread,
        }),
    }
}

/// Adds what a wait on `monitor` at `time_ns` was on: the class of the monitor's object
/// and, for a `java.lang.Class` object, the class it stands for.
pub(crate) fn note_monitor(
    model: &Model,
    monitor: u64,
    time_ns: u64,
    classes: &mut std::collections::BTreeSet<String>,
    class_objects: &mut std::collections::BTreeSet<String>,
) {
    if let Some(class) = model.monitor_class(monitor, time_ns) {
        classes.insert(class.to_string());
    }
    if let Some(class) = model.monitor_class_object(monitor, time_ns) {
        class_objects.insert(class.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analysis;
    use crate::events::Event;
    use crate::model::tests::entering;

    #[test]
    fn class_objects_are_said_by_their_class() {
        let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
        let none = Default::default();
        assert_eq!(
            monitors_said(&set(&["java.lang.Class"]), &set(&["Shop$Registry"]), &none).as_deref(),
            Some("on class Shop$Registry")
        );
        assert_eq!(
            monitors_said(
                &set(&["Shop$Till", "java.lang.Class"]),
                &set(&["Shop$Registry"]),
                &none
            )
            .as_deref(),
            Some("on a Shop$Till or class Shop$Registry")
        );
        assert_eq!(monitors_said(&set(&[]), &set(&[]), &none), None);

        let mut model = Model::default();
        for event in [
            Event::MonitorClass {
                time_ns: 0,
                monitor: 0x10,
                class: "java.lang.Class".into(),
            },
            Event::MonitorClassObject {
                time_ns: 0,
                monitor: 0x10,
                class: "Shop$Registry".into(),
            },
            Event::OffCpu(entering(42, 1)),
        ] {
            model.apply(&event);
        }
        let stacks = Analysis::new(&model).blocked_stacks().to_vec();
        assert_eq!(
            stacks[0].class_monitors.iter().collect::<Vec<_>>(),
            ["Shop$Registry"]
        );
    }
}
