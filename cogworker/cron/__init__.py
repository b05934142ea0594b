"""cron"""
