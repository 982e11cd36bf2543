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

shutil.copy('/tmp/mem/placement.rs', f"{root}/scheduler/placement.rs")
edit('scheduler/mod.rs', [("mod names;\n", "mod names;\nmod placement;\n")])
edit('scheduler/settings.rs', [
("""    pub aging_after: Option<Duration>,
}""", """    pub aging_after: Option<Duration>,
    /// The memory router (`routing.router.use: memory`): when set, models are
    /// placed on these GPUs by their [`ModelSettings::memory`], and it
    /// decides evictions (`groups` and `matrix` are ignored).
    pub memory: Option<crate::policy::memory::GpuPool>,
}"""),
("""            aging_after: None,
""", """            aging_after: None,
            memory: None,
"""),
("""    pub parallel: Parallel,
}""", """    pub parallel: Parallel,
    /// What the memory router knows of it (`memory`, `gpus`, `persistent`);
    /// `None`: it holds no GPU memory.
    pub memory: Option<crate::policy::memory::MemoryModel>,
}"""),
("""            parallel: Parallel::Unlimited,
""", """            parallel: Parallel::Unlimited,
            memory: None,
"""),
("""    Matrix(#[from] MatrixError),""", """    Matrix(#[from] MatrixError),
    /// The memory router's settings cannot place every model.
    #[error(transparent)]
    Memory(#[from] crate::policy::memory::MemoryError),"""),
])
edit('scheduler/core.rs', [
("""    pub(super) policy: Box<dyn EvictionPolicy>,""", """    pub(super) policy: Box<dyn EvictionPolicy>,
    /// The memory router's placements (`placement.rs`); `None` under groups
    /// and the matrix.
    pub(super) placements: Option<super::placement::Placements>,"""),
("""        let policy: Box<dyn EvictionPolicy> = match &settings.matrix {
            Some(matrix) => Box::new(Matrix::new(&ids, matrix, |name| {
                names.resolve(name).map(str::to_owned)
            })?),
            None => Box::new(Groups::new(&ids, &settings.groups)?),
        };""", """        let memory = match &settings.memory {
            Some(pool) => {
                let needs = sorted
                    .iter()
                    .map(|m| {
                        m.memory
                            .unwrap_or(crate::policy::memory::MemoryModel::new(0))
                    })
                    .collect();
                Some(crate::policy::memory::Memory::new(
                    &ids,
                    &pool.with_models(needs),
                )?)
            }
            None => None,
        };
        let policy: Box<dyn EvictionPolicy> = match (&memory, &settings.matrix) {
            (Some(memory), _) => Box::new(memory.clone()),
            (None, Some(matrix)) => Box::new(Matrix::new(&ids, matrix, |name| {
                names.resolve(name).map(str::to_owned)
            })?),
            (None, None) => Box::new(Groups::new(&ids, &settings.groups)?),
        };
        let placements =
            memory.map(|memory| super::placement::Placements::new(memory, ids.len()));"""),
("""            policy,
""", """            policy,
            placements,
"""),
])
edit('scheduler/decide.rs', [
("""    /// Whether an operation (swap or stop) touches model `t`.
    fn is_busy(""", """    /// Whether an operation (swap or stop) touches model `t`.
    pub(super) fn is_busy("""),
("""    fn evict_set(&self, t: usize) -> Vec<usize> {
        let up = self.up();""", """    fn evict_set(&self, t: usize) -> Vec<usize> {
        if self.placements.is_some() {
            // Under the memory router a model that cannot fit waits (see `decide`).
            return self.memory_plan(t).map(|plan| plan.evict).unwrap_or_default();
        }
        let up = self.up();"""),
("""        let evict = self.evict_set(t);
        if m.is_ready() && evict.is_empty() {
            return Decision::Serve;
        }""", """        if m.is_ready() && self.placements.is_some() {
            // Placed when it started: it holds its memory already.
            return Decision::Serve;
        }
        if self.placements.is_some() && self.memory_plan(t).is_none() {
            // Persistent models hold the memory it needs: it waits for a change.
            return Decision::Wait(Vec::new());
        }
        let evict = self.evict_set(t);
        if m.is_ready() && evict.is_empty() {
            return Decision::Serve;
        }"""),
("""        let reason = self.policy.explain(t, &self.up());""", """        let reason = match self.place_on_gpus(t) {
            Some(reason) => Some(reason),
            None => self.policy.explain(t, &self.up()),
        };"""),
])
edit('scheduler/reconfigure.rs', [
("""                    parallel: Parallel::Unlimited,
                });""", """                    parallel: Parallel::Unlimited,
                    memory: self
                        .placements
                        .as_ref()
                        .and_then(|p| p.memory.model(t).copied()),
                });"""),
])
edit('router/actor.rs', [
("""        let ask_slots = self.scheduler.wants_slots(&model);""", """        let ask_slots = self.scheduler.wants_slots(&model);
        let gpus = self.scheduler.placement(&model);"""),
("""                join_all(evict.iter().map(|m| launcher.stop(m, grace))).await;
                launcher.ensure_ready(&target).await?;""", """                // A model with a sleep mode sleeps instead of stopping.
                join_all(evict.iter().map(|m| launcher.release(m, grace))).await;
                match &gpus {
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
