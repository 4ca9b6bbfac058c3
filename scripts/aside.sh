#!/bin/sh
# Work that runs beside make test's timed tests (Makefile, `test`): the sanitizer builds and the
# compose test's image bases.
#
#   scripts/aside.sh start CMD [ARG...]  runs CMD in a session of its own (one kill stops it all),
#                                        weighed at autogroup nice 19, in the idle class, and off
#                                        the first CPU; it execs, so the $! of `scripts/aside.sh
#                                        start ... &` is the session's id
#   scripts/aside.sh widen SID           gives session SID every CPU and autogroup nice 0 back
#
# Why off the first CPU: on the VMs this project is built and tested on, a guest whose CPUs are all
# busy at once loses whole 100 ms periods of one of them to the host, whatever the guest's own
# priorities say; a guest with one CPU idle now and then loses nothing (measured with two spinning
# threads against one, and against a second thread busy 70-90% of every 10 ms; at 97% it lost
# periods in one run of two: bench/host_stalls.py, bench/results/make-test.md, "The host's 100 ms"). The idle class and nice 19 keep the compilers
# behind the tests inside the guest; only a CPU they cannot fill keeps the host from pausing the
# one a load generator or a server under test is on.
set -eu

cpus=$(nproc)

case "${1:-}" in
start)
	shift
	if [ "$cpus" -gt 1 ] && taskset -c "1-$((cpus - 1))" true 2>/dev/null; then
		set -- taskset -c "1-$((cpus - 1))" "$@"
	fi
	if chrt --idle 0 true 2>/dev/null; then
		set -- chrt --idle 0 "$@"
	else
		set -- nice -n 19 "$@"
	fi
	# The session is set from inside it, before CMD starts, so every process CMD starts inherits it.
	exec setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec "$@"' aside "$@"
	;;
widen)
	sid=$2
	echo 0 >"/proc/$sid/autogroup" 2>/dev/null || true
	# Twice: a process forked during the first pass may have copied its parent's mask before the
	# parent was widened; new processes copy a widened parent's.
	for pass in 1 2; do
		for pid in $(pgrep -s "$sid" || true); do
			taskset -a -p -c "0-$((cpus - 1))" "$pid" >/dev/null 2>&1 || true
		done
	done
	;;
*)
	echo "usage: $0 start CMD [ARG...] | widen SID" >&2
	exit 2
	;;
esac
