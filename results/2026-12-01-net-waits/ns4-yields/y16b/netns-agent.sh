#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv11555<HOST>
h=$1; shift
exec ip netns exec "knv11555$h" sh -c "$*"
