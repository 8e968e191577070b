//! A service as benchplan reaches it: resolved from the plan (client, headers, model,
//! tokenizer; the simulator started), checked before its cases (the model it serves,
//! the request wording it accepts, the prefix-cache reset) and, for a whole plan,
//! every service a run needs with its metrics page and version. The executor, the
//! optimizer and `bench`/`probe` all reach services through here.

pub mod checks;
pub mod fleet;
pub mod preflight;
pub mod target;
