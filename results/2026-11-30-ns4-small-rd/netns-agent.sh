#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv6835<HOST>
h=$1; shift
exec ip netns exec "knv6835$h" sh -c "$*"
