#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv5785<HOST>
h=$1; shift
exec ip netns exec "knv5785$h" sh -c "$*"
