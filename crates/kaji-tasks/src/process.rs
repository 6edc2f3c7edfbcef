//! Spawning commands in their own process group and killing the whole
//! group (placeholder until issue 5 lands).
