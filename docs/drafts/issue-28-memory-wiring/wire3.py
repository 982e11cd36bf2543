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
print("ok3")
