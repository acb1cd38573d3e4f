#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv11026<HOST>
h=$1; shift
exec ip netns exec "knv11026$h" sh -c "$*"
