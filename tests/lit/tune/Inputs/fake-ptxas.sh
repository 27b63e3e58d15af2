#!/bin/sh
# Stand-in for ptxas in lit tests: the first call spills, the third needs the fewest registers.
# Calls are counted in the file $FAKE_PTXAS_COUNT.
n=$(cat "$FAKE_PTXAS_COUNT" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$FAKE_PTXAS_COUNT"
echo "ptxas info    : Compiling entry function 'kernel_o_s0' for 'sm_86'"
echo "ptxas info    : Function properties for kernel_o_s0"
if [ "$n" = 1 ]; then
  echo "    64 bytes stack frame, 64 bytes spill stores, 64 bytes spill loads"
  echo "ptxas info    : Used 255 registers, 2048 bytes smem, 400 bytes cmem[0]"
elif [ "$n" = 3 ]; then
  echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
  echo "ptxas info    : Used 24 registers, 2048 bytes smem, 400 bytes cmem[0]"
else
  echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
  echo "ptxas info    : Used 40 registers, 1024 bytes smem, 400 bytes cmem[0]"
fi
