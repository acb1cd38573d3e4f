#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv13964<HOST>
h=$1; shift
exec ip netns exec "knv13964$h" sh -c "$*"
