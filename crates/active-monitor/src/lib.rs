//! Monitors as active objects: delegated critical sections that return
//! futures (ActiveMonitor). Work in progress (issue 10).
