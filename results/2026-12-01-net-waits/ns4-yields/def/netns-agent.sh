#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv9471<HOST>
h=$1; shift
exec ip netns exec "knv9471$h" sh -c "$*"
