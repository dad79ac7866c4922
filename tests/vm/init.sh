#!/bin/sh
# The guest's /init (run by busybox sh): mounts what sonde needs, runs every scenario once, sends
# each output file back on the console base64-encoded between marker lines (the host checks them
# with the host tests' own assertions) and powers off. It never judges a result: a scenario that
# fails still sends its status and stderr, and the host decides what that kernel should have done.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
ip link set lo up
# Kernel messages on the console would break the base64 lines.
dmesg -n 1
cd /tmp
echo "SONDE-VM: init $(uname -r)"
uname -r > /out/uname
export SONDE_LOG=warn

# record NAME WORKLOAD [ARGS FOR sonde record...]: starts /work/WORKLOAD (long enough to outlive
# the recording under emulation), lets it settle ($SETTLE seconds, 1 by default), records it and
# keeps its pid, status, stdout and stderr.
record() {
    name=$1 workload=$2
    shift 2
    /work/$workload 120 &
    pid=$!
    echo $pid > /out/$name.pid
    sleep ${SETTLE:-1}
    echo "SONDE-VM: $name: recording pid $pid"
    sonde record --pid $pid "$@" --output /out/$name.pb.gz --summary-json /out/$name.json \
        > /out/$name.stdout 2> /out/$name.stderr
    echo $? > /out/$name.status
    kill $pid
    wait $pid 2>/dev/null
    echo "SONDE-VM: $name: exit $(cat /out/$name.status)"
}

record cpu_fp cpu_split_fp --duration 5 --unwind fp
record cpu_tables cpu_split_nofp --duration 5 --unwind tables
record go go_split --duration 5

# What only guests of another architecture than the host's run (the host's tests cover their own):
# Debian's Python, whose py_split.py rounds take about a second under emulation, so the recording
# covers many of them, after the first (emulation translating the interpreter's code) has passed:
# with 1 s to settle and 12 s, burn_fifty was seen at 55.2%; and CPU burnt in a signal handler,
# walked by tables through the trampoline.
# One arm64 guest is enough for the Python walker (the host's tests cover x86_64): the other is
# booted with `sonde.no_python`, a third of its time saved.
if [ -e /usr/bin/python3 ] && ! grep -qw sonde.no_python /proc/cmdline; then
    printf '#!/bin/sh\nexec /usr/bin/python3 /work/py_split.py "$@"\n' > /work/py_split
    chmod +x /work/py_split
    SETTLE=4 record python py_split --duration 20
fi
if [ -e /work/signal_burn_nofp ]; then
    record signal signal_burn_nofp --duration 5 --unwind tables
fi

# Off-CPU as tests/offcpu_sleep_split.rs records it: the sleeper and a busy loop beside it.
/work/cpu_split_fp 120 &
busy=$!
echo $busy > /out/offcpu.busy.pid
record offcpu offcpu_sleep --profile offcpu --duration 4 --pid $busy
kill $busy
wait $busy 2>/dev/null

# The daemon: windows of every process into a data directory while a workload runs.
/work/cpu_split_fp 120 &
busy=$!
echo $busy > /out/daemon.pid
echo "SONDE-VM: daemon: running"
sonde run --duration 8 --export-interval 2 --data-dir /out/data --metrics-addr none \
    > /out/daemon.stdout 2> /out/daemon.stderr
echo $? > /out/daemon.status
kill $busy
wait $busy 2>/dev/null
echo "SONDE-VM: daemon: exit $(cat /out/daemon.status)"

cd /out
for f in $(find . -type f | sort); do
    f=${f#./}
    echo "SONDE-VM-FILE $f $(stat -c %s $f)"
    base64 $f
    echo "SONDE-VM-END"
done
echo "SONDE-VM: done"
sync
poweroff -f
