import sys, shutil
root = sys.argv[1]  # .../server/src
def edit(p, pairs):
    p = f"{root}/{p}"
    s = open(p).read()
    for old, new in pairs:
        if old not in s:
            print("MISSING in", p, ":", old[:80]); sys.exit(1)
        s = s.replace(old, new, 1)
    open(p, 'w').write(s)

edit('router/actor.rs', [
("""        let ask_slots = self.scheduler.wants_slots(&model);""", """        let ask_slots = self.scheduler.wants_slots(&model);
        let gpus = self.scheduler.placement(&model);"""),
("""                launcher.ensure_ready(&target).await?;""", """                match &gpus {
                    Some(gpus) => launcher.ensure_ready_on(&target, gpus).await?,
                    None => launcher.ensure_ready(&target).await?,
                }"""),
])
print("ok")
edit('scheduler/reconfigure.rs', [
("""        let remap = |t: usize| map.get(t).copied().flatten();
""", """        let remap = |t: usize| map.get(t).copied().flatten();
        if let (Some(new), Some(old)) = (next.placements.as_mut(), self.placements.as_ref()) {
            // Models that stay keep their GPUs.
            new.keep(old, |u| map.iter().position(|&m| m == Some(u)));
        }
"""),
])
edit('config/resolved/mapping.rs', [
("""                parallel: model.parallel,
            })""", """                parallel: model.parallel,
                memory: self.memory.as_ref().map(|_| crate::policy::memory::MemoryModel {
                    memory: model.memory.unwrap_or(0),
                    gpus: model.gpus,
                    persistent: model.persistent,
                }),
            })"""),
("""            aging_after: self.priority_rules.aging_after,
        }""", """            aging_after: self.priority_rules.aging_after,
            memory: self.memory.as_ref().and_then(|m| match &m.gpus {
                crate::config::GpuList::Listed(gpus) => Some(crate::policy::memory::GpuPool {
                    gpus: gpus.clone(),
                    reserve: m.reserve,
                    evict_costs: m.evict_costs.clone(),
                }),
                // Resolved at start (`Config::on_detected_gpus`) before any
                // scheduler is built.
                _ => None,
            }),
        }"""),
])
print("ok2")
