//! Locks that monitor themselves and adapt their waiting policy at run time
//! (Mukherjee & Schwan's adaptive objects). Work in progress (issue 9).
