// Package placement chooses the machines of a job: locations and locality
// levels, workers (a machine as placement sees it), policies, the buckets of
// compatible workers at each level, rank orders, and the scheduler
// (Schedule for one job, ScheduleAll for several in one pass) with the
// decision summaries of ADR-0021.
//
// Inside each machine it takes the best-connected free GPUs through package
// topology (PickDevices), which knows one machine's GPUs and nothing of
// groups.
//
// Everything here is pure: data in, data out, no network, SSH or file I/O,
// and the same inputs always give the same result. It imports topology and no
// other gpulayer package.
package placement
