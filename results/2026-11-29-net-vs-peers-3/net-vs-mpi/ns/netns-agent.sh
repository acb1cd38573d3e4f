#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv27981<HOST>
h=$1; shift
exec ip netns exec "knv27981$h" sh -c "$*"
