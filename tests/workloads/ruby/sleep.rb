# Sleeps 20 ms in sleep_twenty, then 10 ms in sleep_ten, for ARGV[0] seconds: its off-CPU time
# splits 2:1 between the two. Prints `ready` first.

def sleep_twenty
  sleep(0.02)
end

def sleep_ten
  sleep(0.01)
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV.fetch(0, "10"))
$stdout.puts "ready"
$stdout.flush
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  sleep_twenty
  sleep_ten
end
