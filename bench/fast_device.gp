# gnuplot -c fast_device.gp IOPS_DAT CDF_DAT IOPS_PNG CDF_PNG  (written by bench/fast_device.sh)
# The file names are ARG1..ARG4 strings: used as data, never pasted into code.
set terminal pngcairo size 1000,620 noenhanced
set grid

set output ARG3
set title "All-miss rows/s against queue depth (one row per 4 KiB block)"
set xlabel "queue depth (rows per gather = reads in flight)"
set ylabel "rows/s (store) or IOPS (raw, fio)"
set logscale x 2
set key below
set format y "%.0f"
plot ARG1 using 1:2 with linespoints lw 2 title "engram::Store gather", \
     ARG1 using 1:3 with linespoints lw 2 title "raw engine (engram-bench read)", \
     ARG1 using 1:4 with linespoints lw 2 title "fio io_uring (fixedbufs, registerfiles)", \
     ARG1 using 1:5 with linespoints lw 2 title "fio, batches of depth reads, each waited for whole (iodepth_batch_complete_min = depth)", \
     ARG1 using 1:6 with linespoints lw 2 title "raw engine, batches of depth reads on the caller's ring, reaped read by read"

set output ARG4
unset logscale
set logscale x 10
set title "Latency CDF: one 24-row all-miss gather vs one 4 KiB read at QD 1"
set xlabel "latency (us)"
set ylabel "percentile"
set yrange [0:100]
set key below
plot ARG2 index 0 using 2:1 with lines lw 2 title "store: 24-row all-miss gather", \
     ARG2 index 1 using 2:1 with lines lw 2 title "fio: one read", \
     ARG2 index 2 using 2:1 with linespoints lw 2 title "raw engine: one read (p50/p90/p99/p99.9)"
